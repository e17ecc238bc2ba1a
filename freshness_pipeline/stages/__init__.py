"""The cycle's stages as plain functions: frames and settings in, frames out."""
