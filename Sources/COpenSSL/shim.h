#ifndef MYSTASH_COPENSSL_SHIM_H
#define MYSTASH_COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/kdf.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/hmac.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/param_build.h>
#include <openssl/blowfish.h>
#include <openssl/pem.h>

/* Blowfish's block function, for bcrypt_pbkdf (OpenSSH's key files), which keys Blowfish
   itself: OpenSSL 3 marks the low-level call deprecated, and no EVP cipher takes a key schedule. */
static inline void ms_blowfish_encrypt(unsigned int *block, const BF_KEY *key) { BF_encrypt(block, key); }
/* EVP_PKEY_KEYPAIR is a macro of macros, which Swift does not import. */
static const int MS_EVP_PKEY_KEYPAIR = EVP_PKEY_KEYPAIR;
#endif
