// OpenSSL 3 libcrypto: AES, CMAC (EVP_MAC), P-256 (EVP_PKEY), RAND_bytes, OPENSSL_cleanse.
// The shim exists so SwiftPM can find the headers via pkg-config (libcrypto, apt libssl-dev) and so
// Swift sees the key selections, which are macros built from other macros that Swift cannot import.
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/param_build.h>
#include <openssl/params.h>
#include <openssl/rand.h>

/// EVP_PKEY_PUBLIC_KEY: the selection for EVP_PKEY_fromdata of a public key (with its domain parameters).
static inline int clibcrypto_selection_public_key(void) { return EVP_PKEY_PUBLIC_KEY; }

/// EVP_PKEY_KEYPAIR: the selection for EVP_PKEY_fromdata of a private and public key.
static inline int clibcrypto_selection_keypair(void) { return EVP_PKEY_KEYPAIR; }
