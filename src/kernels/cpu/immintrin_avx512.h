#pragma once
// <immintrin.h> for the files compiled with AVX-512 (and AMX) flags. GCC 12 warns inside its own
// AVX-512 headers (the `__Y = __Y` idiom of _mm512_undefined_*, used by cvtph_ps, cvtepi32_ps,
// inserti64x4, ...): a known false positive, silenced for the header only. It works only where
// this is the translation unit's first route to <immintrin.h>: a header included ahead of it
// that pulled <immintrin.h> in would bring the warnings back (the build shows them).

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
