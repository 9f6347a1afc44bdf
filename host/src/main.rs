//! The `gantry` command: everything is in the library's [`gantry::cli`].

use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: gantry::cli::Allocator = gantry::cli::ALLOCATOR;

fn main() -> ExitCode {
    gantry::cli::main()
}
