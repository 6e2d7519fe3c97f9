//! Examples of the ferry framework; see the binaries in `src/bin`.
