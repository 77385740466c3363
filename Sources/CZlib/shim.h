#include <zlib.h>

// inflateInit2 is a macro, which Swift cannot call: -15 window bits read raw deflate (no zlib header).
static inline int og_inflate_init_raw(z_stream *stream) { return inflateInit2(stream, -15); }
static inline int og_deflate_init_raw(z_stream *stream) {
    return deflateInit2(stream, Z_BEST_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
}
