#!/usr/bin/env python3
"""Writes one JSON file per scenario of the sync log file and wrapped sync key (SYNC.md),
using AES-GCM and HKDF implementations independent of ours (Python `cryptography`)."""
import hashlib, json, os, struct
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sync")
sync_key = bytes(range(32))
data_key = bytes(range(100, 132))
other_data_key = bytes(range(1, 33))
nonce = bytes.fromhex("0f0e0d0c0b0a090807060504")
device = bytes.fromhex("00112233445566778899aabbccddeeff")
previous = hashlib.sha256(b"the previous file").digest()

def hkdf(ikm, info):
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(ikm)

log_key = hkdf(sync_key, b"MyStash sync log v1")
wrap_key = hkdf(data_key, b"MyStash sync key wrap v1")

def log_file(payload, sequence=3, dev=device, prev=previous):
    header = b"MSSL\x01" + dev + struct.pack(">Q", sequence) + prev
    return header + nonce + AESGCM(log_key).encrypt(nonce, payload, header)

def flip(data, index):
    data = bytearray(data); data[index] ^= 0x01; return bytes(data)

payload = json.dumps({"deviceName": "laptop", "changes": []}).encode()
good = log_file(payload)
logs = {
    "log-success": (good, "success"),
    "log-flipped-device": (flip(good, 6), "authentication-failed"),
    "log-flipped-sequence": (flip(good, 28), "authentication-failed"),
    "log-flipped-previous-hash": (flip(good, 40), "authentication-failed"),
    "log-flipped-ciphertext": (flip(good, 80), "authentication-failed"),
    "log-flipped-tag": (flip(good, len(good) - 1), "authentication-failed"),
    "log-truncated": (good[:60], "invalid-input"),
    "log-not-a-log-file": (b"MSSX" + good[4:], "invalid-input"),
    "log-unknown-version": (good[:4] + b"\x02" + good[5:], "unsupported-version"),
}
for name, (data, expected) in logs.items():
    with open(os.path.join(here, name + ".json"), "w") as f:
        json.dump({"scenario": name, "expected": expected, "syncKey": sync_key.hex(), "file": data.hex(),
                   "device": device.hex(), "sequence": 3, "previousHash": previous.hex(),
                   "payload": payload.decode() if expected == "success" else None}, f, indent=2)
        f.write("\n")

header = b"MSSK\x01"
wrapped = header + nonce + AESGCM(wrap_key).encrypt(nonce, sync_key, header)
wraps = {
    "wrap-success": (wrapped, data_key, "success"),
    "wrap-other-data-key": (wrapped, other_data_key, "authentication-failed"),
    "wrap-flipped-key": (flip(wrapped, 20), data_key, "authentication-failed"),
    "wrap-truncated": (wrapped[:-1], data_key, "invalid-input"),
}
for name, (data, key, expected) in wraps.items():
    with open(os.path.join(here, name + ".json"), "w") as f:
        json.dump({"scenario": name, "expected": expected, "dataKey": key.hex(), "wrapped": data.hex(),
                   "syncKey": sync_key.hex() if expected == "success" else None}, f, indent=2)
        f.write("\n")

check = HKDF(algorithm=hashes.SHA256(), length=16, salt=None, info=b"MyStash sync data key check v1").derive(data_key)
with open(os.path.join(here, "data-key-check.json"), "w") as f:
    json.dump({"scenario": "data-key-check", "expected": "success", "dataKey": data_key.hex(), "check": check.hex()},
              f, indent=2)
    f.write("\n")
