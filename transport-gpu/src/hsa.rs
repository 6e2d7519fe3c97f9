//! AMD GPUs through the HSA runtime (`libhsa-runtime64`), loaded at run time (placeholder until
//! the next commit).
