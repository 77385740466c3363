#!/usr/bin/env python3
"""Writes the keyed archives these tests read, in Apple's NSKeyedArchiver format (a binary
property list with $archiver, $version, $top and $objects, objects referenced by UID), with
Python's plistlib: an implementation independent of Foundation. Also writes expected.json,
the value each archive holds, tagged with its type.

Run: python3 make-archives.py  (in this folder)"""
import json
import plistlib
from plistlib import UID


class Archiver:
    def __init__(self):
        self.objects = ["$null"]
        self.classes = {}

    def cls(self, name, chain):
        if name not in self.classes:
            self.objects.append({"$classname": name, "$classes": chain})
            self.classes[name] = UID(len(self.objects) - 1)
        return self.classes[name]

    def add(self, value):
        kind, payload = value
        index = len(self.objects)
        if kind in ("string", "int", "real", "bool", "data"):
            self.objects.append(payload if kind != "data" else bytes.fromhex(payload))
            return UID(index)
        self.objects.append(None)
        if kind == "array":
            obj = {"NS.objects": [self.add(v) for v in payload], "$class": self.cls("NSArray", ["NSArray", "NSObject"])}
        elif kind == "dictionary":
            keys = [self.add(("string", k)) for k in payload]
            values = [self.add(v) for v in payload.values()]
            obj = {"NS.keys": keys, "NS.objects": values, "$class": self.cls("NSDictionary", ["NSDictionary", "NSObject"])}
        elif kind == "date":
            obj = {"NS.time": float(payload), "$class": self.cls("NSDate", ["NSDate", "NSObject"])}
        elif kind == "url":
            obj = {"NS.base": UID(0), "NS.relative": self.add(("string", payload)), "$class": self.cls("NSURL", ["NSURL", "NSObject"])}
        elif kind == "mutabledata":
            obj = {"NS.data": bytes.fromhex(payload), "$class": self.cls("NSMutableData", ["NSMutableData", "NSData", "NSObject"])}
        elif kind == "mutablestring":
            obj = {"NS.string": payload, "$class": self.cls("NSMutableString", ["NSMutableString", "NSString", "NSObject"])}
        elif kind == "uuid":
            obj = {"NS.uuidbytes": bytes.fromhex(payload.replace("-", "")), "$class": self.cls("NSUUID", ["NSUUID", "NSObject"])}
        else:
            raise TypeError(kind)
        self.objects[index] = obj
        return UID(index)


def archive(value):
    archiver = Archiver()
    root = archiver.add(value)
    return plistlib.dumps({"$version": 100000, "$archiver": "NSKeyedArchiver", "$top": {"root": root},
                           "$objects": archiver.objects}, fmt=plistlib.FMT_BINARY, sort_keys=False)


CASES = {
    "string": ("string", "Zoë – ünïcode ✓"),
    "mutable-string": ("mutablestring", "edited"),
    "integer": ("int", 42),
    "large-integer": ("int", -9007199254740993),
    "real": ("real", -1234.5),
    "boolean": ("bool", True),
    "date": ("date", 631152000.5),
    "data": ("data", "0001feff"),
    "mutable-data": ("mutabledata", "1020"),
    "url": ("url", "https://example.com/a?b=c#d"),
    "uuid": ("uuid", "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"),
    "array": ("array", [("string", "one"), ("int", 2), ("real", 3.5), ("date", -86400.0)]),
    "dictionary": ("dictionary", {"name": ("string", "Ada"), "tags": ("array", [("string", "x"), ("string", "y")]),
                                  "nested": ("dictionary", {"k": ("int", 1)})}),
}

if __name__ == "__main__":
    for name, value in CASES.items():
        with open(f"{name}.archive", "wb") as file:
            file.write(archive(value))
    with open("expected.json", "w") as file:
        json.dump(CASES, file, indent=1, ensure_ascii=False, sort_keys=True)
        file.write("\n")
