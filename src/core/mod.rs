//! Pure algorithms: one step function per algorithm. No napi, no I/O, no clock reads; the
//! clock is an argument. Each step is the specification, the engine of the memory store and
//! the oracle its Lua script is checked against.
#![forbid(unsafe_code)]

pub mod adaptive;
pub mod bounds;
pub mod bucket;
pub mod budget;
pub mod concurrent;
pub mod fair;
pub mod leaky;
pub mod limit;
pub mod pacer;
pub mod quota;
pub mod sliding;
pub mod sliding_counter;
pub mod window;
