//! `min`: the aggregate spec folding with [`concast_aggregate::Min`].
#![no_std]

concast_sdk::export_spec!(concast_aggregate::Aggregate<concast_aggregate::Min>);
