//! One module per `vyrn` subcommand: the roles (`seq`, `data`, `replica`, `load`), the lab
//! (`paths`), the operator's tools (`tools`) and the whole home (`up`).

#[cfg(feature = "lab")]
pub mod attack;
pub mod data;
#[cfg(feature = "lab")]
pub mod isolate;
pub mod lab;
pub mod load;
pub mod paths;
pub mod replica;
pub mod seq;
#[cfg(feature = "lab")]
pub mod sim;
pub mod standby;
pub mod tools;
pub mod up;

/// A core list as `--cores` takes it (`1`, `0-3,6`).
#[derive(Debug, Clone)]
pub struct Cores(pub Vec<usize>);

/// Parse a `--cores` list.
pub fn cores(s: &str) -> Result<Cores, String> {
    vyrn_nic::wait::parse_cores(s).map(Cores)
}
