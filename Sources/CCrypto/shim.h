// OpenSSL's libcrypto, for SHA-256 of document bytes. The SHA256_* calls are deprecated in
// OpenSSL 3 in favour of EVP, but only they expose the running state (SHA256_CTX: eight words
// and a length), which a revision's record keeps so the next save continues its hash instead
// of reading the document again from byte 0. They run the same block code as EVP's SHA-256.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/sha.h>
