//! The UDP driver: runs sessions over a real socket, with the monotonic clock.
