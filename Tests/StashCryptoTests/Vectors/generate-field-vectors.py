#!/usr/bin/env python3
"""Writes one JSON file per scenario of the encrypted-field format (FORMAT.md), using an
AES-GCM implementation independent of ours (Python `cryptography`)."""
import json, os, struct
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "field")
key = bytes(range(32))
other_key = bytes(range(1, 33))
nonce = bytes.fromhex("000102030405060708090a0b")
place = {"store": "6C1E2E57-3C73-4C8B-9B8A-1F0D6A2B9E11", "entity": "System", "attribute": "password", "primaryKey": 7}

def aad(p):
    lp = lambda s: struct.pack(">I", len(s.encode())) + s.encode()
    return b"mystash/field/v1\x00" + lp(p["store"]) + lp(p["entity"]) + lp(p["attribute"]) + struct.pack(">q", p["primaryKey"])

def envelope(plaintext, p=place, k=key):
    sealed = AESGCM(k).encrypt(nonce, plaintext.encode(), aad(p))
    return b"\x01" + nonce + sealed

def flip(data, index):
    data = bytearray(data); data[index] ^= 0x01; return bytes(data)

plain = "correct horse battery staple"
good = envelope(plain)
scenarios = {
    "success": (good, place, key, "success"),
    "success-empty": (envelope(""), place, key, "success"),
    "success-unicode": (envelope("mot de passe é 🔑"), place, key, "success"),
    "wrong-key": (good, place, other_key, "authentication-failed"),
    "flipped-nonce": (flip(good, 1), place, key, "authentication-failed"),
    "flipped-ciphertext": (flip(good, 14), place, key, "authentication-failed"),
    "flipped-tag": (flip(good, len(good) - 1), place, key, "authentication-failed"),
    "truncated": (good[:28], place, key, "truncated"),
    "truncated-tag": (good[:-1], place, key, "authentication-failed"),
    "unknown-version": (b"\x02" + good[1:], place, key, "unsupported-version"),
    "moved-to-another-row": (good, dict(place, primaryKey=8), key, "authentication-failed"),
    "moved-to-another-attribute": (good, dict(place, attribute="userId"), key, "authentication-failed"),
    "moved-to-another-entity": (good, dict(place, entity="Note"), key, "authentication-failed"),
    "moved-to-another-store": (good, dict(place, store="0D1E2E57-3C73-4C8B-9B8A-1F0D6A2B9E11"), key, "authentication-failed"),
}
for name, (data, p, k, expected) in scenarios.items():
    plaintext = {"success": plain, "success-empty": "", "success-unicode": "mot de passe é 🔑"}.get(name)
    with open(os.path.join(here, name + ".json"), "w") as f:
        json.dump({"scenario": name, "expected": expected, "key": k.hex(), "store": p["store"], "entity": p["entity"],
                   "attribute": p["attribute"], "primaryKey": p["primaryKey"], "envelope": data.hex(),
                   "plaintext": plaintext}, f, indent=2, ensure_ascii=False)
        f.write("\n")
