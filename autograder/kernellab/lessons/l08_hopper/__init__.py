"""Lesson 08, Hopper: TMA tile loads, warp specialisation and FP8 - FlashAttention-3's ideas in Triton."""
