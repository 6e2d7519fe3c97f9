#![no_std]
//! Placeholder: this crate lands with its own issue.
