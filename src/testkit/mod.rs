//! Test support, outside the library's API: compiled for the crate's own unit tests and, for
//! the integration tests and benchmarks, with the `testkit` feature (which the crate's
//! dev-dependency on itself turns on; a normal build never has it).
//!
//! - [`records`]: raw records, byte for byte as the kernel writes them into a ring;
//! - [`tracepoints`]: tracepoint formats and RAW data;
//! - [`events`]: decoded [`crate::event::Event`]s, for everything after the decoder;
//! - [`symbols`]: a crafted kernel for the symbolizer;
//! - [`named`]: samples named as the symbolizer names them;
//! - [`fuzz`]: the fuzz targets' ways into glue the crate keeps to itself.

pub mod events;
pub mod fuzz;
pub mod named;
pub mod records;
pub mod symbols;
pub mod tracepoints;
