// libcbor (apt libcbor-dev, pkg-config libcbor): CBOR (RFC 8949) item headers decoded by its streaming
// decoder and written by its encoders. The shim exists so SwiftPM finds the header through pkg-config.
#include <cbor.h>
