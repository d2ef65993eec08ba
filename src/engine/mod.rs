//! Decode engines: the CPU reference decoder and the GPU seek kernel implement one trait and are checked
//! against each other.
