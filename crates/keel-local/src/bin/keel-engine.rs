//! keel's engine process on its own, for programs that run the embedded model without
//! carrying the engine in their own binary (`LocalConfig::engine`), and for tests.

fn main() {
    std::process::exit(keel_local::engine::child::main());
}
