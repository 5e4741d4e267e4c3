//! `count`: the aggregate spec folding with [`concast_aggregate::Count`].
#![no_std]

concast_sdk::export_spec!(concast_aggregate::Aggregate<concast_aggregate::Count>);
