//! Placeholder: this crate lands with its own issue.
