//! Generates the Rust types and gRPC client stubs from the repository's protos
//! (`../../proto/scout/v1/*.proto`, the single source of the protocol) at build time.
//!
//! `protoc` comes from the `protoc-bin-vendored` crate, so a plain `cargo build` works on a
//! fresh machine. On a platform that crate has no binary for, set `PROTOC` to a protoc 3.15+.

use std::env;
use std::path::PathBuf;

const PROTOS: [&str; 3] = ["game", "arena", "matches"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    match protoc_bin_vendored::protoc_bin_path() {
        // SAFETY: a build script is single-threaded; nothing reads the environment concurrently.
        Ok(protoc) => unsafe { env::set_var("PROTOC", protoc) },
        Err(e) if env::var_os("PROTOC").is_some() => {
            println!("cargo:warning=no vendored protoc for this platform ({e}); using $PROTOC");
        }
        Err(e) => {
            return Err(format!("no vendored protoc for this platform ({e}); set PROTOC").into());
        }
    }

    // $SCOUT_PROTO_DIR when set (a copy of the kit outside the repository), else the
    // repository's proto/ two levels up.
    println!("cargo:rerun-if-env-changed=SCOUT_PROTO_DIR");
    let root = match env::var_os("SCOUT_PROTO_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("../../proto"),
    };
    let files = PROTOS.map(|name| root.join(format!("scout/v1/{name}.proto")));
    for file in &files {
        if !file.is_file() {
            return Err(format!(
                "{} not found: the kit builds from the repository's proto/ directory, so keep it \
                 at clients/rust/, or set SCOUT_PROTO_DIR to a proto/ directory",
                file.display()
            )
            .into());
        }
        println!("cargo:rerun-if-changed={}", file.display());
    }
    println!("cargo:rerun-if-changed=build.rs");

    tonic_prost_build::configure()
        .build_server(false)
        .compile_protos(&files, &[root])?;
    Ok(())
}
