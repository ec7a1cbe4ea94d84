// OpenSSL's libcrypto, for SHA-256 of document bytes (its message-digest API, not the
// deprecated SHA256_* functions).
#include <openssl/evp.h>
