#!/usr/bin/python3
"""Writes the weight-file fixtures of tests/unit/model_weights_test.cc.

Run with Debian's python3-torch (/usr/bin/python3), from anywhere:

    /usr/bin/python3 tests/data/model/make_weight_fixtures.py

Each case is a directory under tests/data/model/weights/ laid out as a Hugging
Face snapshot. expected.json holds, for every case that loads, each tensor's
dtype, shape, contiguous little-endian bytes (hex) and values, as PyTorch sees
them. safetensors files are written by hand (Debian has no safetensors module),
following https://huggingface.co/docs/safetensors: an 8-byte little-endian
header length, a JSON header, then the data.
"""
import collections
import json
import os
import shutil
import struct
import zipfile

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "weights")

SAFETENSORS_DTYPES = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.bool: "BOOL",
}


def raw_bytes(t):
    """The contiguous little-endian bytes of t (numpy has no bfloat16)."""
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def describe(tensors):
    out = collections.OrderedDict()
    for name, t in tensors.items():
        t = t.detach()
        out[name] = {
            "dtype": SAFETENSORS_DTYPES[t.dtype],
            "shape": list(t.shape),
            "hex": raw_bytes(t).hex(),
            "values": [float(v) for v in t.flatten().tolist()],
        }
    return out


def case_dir(name):
    path = os.path.join(ROOT, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def write_safetensors(path, tensors, metadata=None):
    header = collections.OrderedDict()
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name, t in tensors.items():
        b = raw_bytes(t)
        header[name] = {"dtype": SAFETENSORS_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def write_zip64_copy(src, dst):
    """Rewrites a torch.save archive with zip64 central directory records
    (sizes and offsets moved into zip64 extra fields, a zip64 end record),
    as a writer does for archives over 4 GiB. Entries stay stored."""
    with zipfile.ZipFile(src) as z:
        entries = [(i.filename, z.read(i.filename)) for i in z.infolist()]
    out = b""
    central = b""
    for name, data in entries:
        n = name.encode()
        crc = zipfile.crc32(data)
        local_extra = struct.pack("<HHQQ", 1, 16, len(data), len(data))
        offset = len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, 0, crc, 0xFFFFFFFF,
                           0xFFFFFFFF, len(n), len(local_extra)) + n + local_extra + data
        extra = struct.pack("<HHQQQ", 1, 24, len(data), len(data), offset)
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 0, 0, 0, crc,
                               0xFFFFFFFF, 0xFFFFFFFF, len(n), len(extra), 0, 0, 0, 0,
                               0xFFFFFFFF) + n + extra
    cd_offset = len(out)
    out += central
    zip64_end = len(out)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, len(entries), len(entries),
                       len(central), cd_offset)
    out += struct.pack("<IIQI", 0x07064B50, 0, zip64_end, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFFFFFF,
                       0xFFFFFFFF, 0)
    with open(dst, "wb") as f:
        f.write(out)


class RunsACommand:
    """What a malicious checkpoint holds: unpickling it calls os.system."""

    def __reduce__(self):
        return (os.system, ("touch /tmp/djshard-weights-fixture-was-executed",))


def main():
    torch.manual_seed(1234)
    expected = collections.OrderedDict()

    # A state_dict as model.state_dict() returns it: an OrderedDict carrying a
    # _metadata attribute, which pickles as BUILD.
    model = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Linear(3, 4),
                                torch.nn.LayerNorm(4))
    sd = model.state_dict()
    torch.save(sd, os.path.join(case_dir("state_dict"), "pytorch_model.bin"))
    expected["state_dict"] = describe(sd)

    # Views of pickled storages: a tied weight (the same tensor under two
    # names), a transposed (non-contiguous) view, offset views, a strided
    # column, and the other dtypes.
    w = torch.randn(3, 4)
    views = collections.OrderedDict()
    views["embed.weight"] = w
    views["lm_head.weight"] = w  # tied: pickled once, referenced twice
    views["transposed"] = w.t()
    views["row"] = w[1]
    views["column"] = w[:, 2]
    views["half"] = torch.randn(2, 3).half()
    views["bf16"] = torch.randn(3, 2).bfloat16()
    views["half_transposed"] = torch.randn(2, 3).half().t()
    views["position_ids"] = torch.arange(6, dtype=torch.int64).reshape(1, 6)
    views["mask"] = torch.tensor([True, False, True])
    views["scalar"] = torch.tensor(2.5, dtype=torch.float64)
    views["param"] = torch.nn.Parameter(torch.randn(2))
    views["empty"] = torch.zeros(0, 3)
    views["bytes"] = torch.tensor([1, 255, 7], dtype=torch.uint8)
    views["int32"] = torch.tensor([-3, 70000], dtype=torch.int32)
    views["int16"] = torch.tensor([-2, 300], dtype=torch.int16)
    views["int8"] = torch.tensor([-1, 5], dtype=torch.int8)
    path = os.path.join(case_dir("views"), "pytorch_model.bin")
    torch.save(views, path)
    expected["views"] = describe(views)

    write_zip64_copy(path, os.path.join(case_dir("zip64"), "pytorch_model.bin"))
    expected["zip64"] = expected["views"]

    # Hand-written safetensors, with __metadata__.
    st = collections.OrderedDict()
    st["encoder.weight"] = torch.randn(2, 3)
    st["encoder.bias"] = torch.randn(3).half()
    st["norm.weight"] = torch.randn(4).bfloat16()
    st["position_ids"] = torch.arange(4, dtype=torch.int64).reshape(1, 4)
    st["flags"] = torch.tensor([False, True])
    st["scale"] = torch.tensor(0.125, dtype=torch.float64)
    st["nothing"] = torch.zeros(0, 2)
    write_safetensors(os.path.join(case_dir("safetensors"), "model.safetensors"), st,
                      {"format": "pt"})
    expected["safetensors"] = describe(st)

    # Sharded safetensors and sharded pytorch_model.bin, with their indexes.
    full = collections.OrderedDict(
        [("a.weight", torch.randn(2, 2)), ("b.weight", torch.randn(3)),
         ("c.weight", torch.randn(2, 1).half())])
    shards = [("a.weight", "b.weight"), ("c.weight",)]
    for fmt, name, save in [
        ("sharded_safetensors", "model", lambda p, t: write_safetensors(p, t, {"format": "pt"})),
        ("sharded_bin", "pytorch_model", lambda p, t: torch.save(t, p)),
    ]:
        d = case_dir(fmt)
        ext = "safetensors" if fmt == "sharded_safetensors" else "bin"
        weight_map = collections.OrderedDict()
        for i, names in enumerate(shards):
            shard = "%s-%05d-of-%05d.%s" % (name, i + 1, len(shards), ext)
            save(os.path.join(d, shard), collections.OrderedDict((n, full[n]) for n in names))
            for n in names:
                weight_map[n] = shard
        index = {"metadata": {"total_size": sum(len(raw_bytes(t)) for t in full.values())},
                 "weight_map": weight_map}
        index_name = "model.safetensors.index.json" if ext == "safetensors" \
            else "pytorch_model.bin.index.json"
        with open(os.path.join(d, index_name), "w") as f:
            json.dump(index, f, indent=2)
        expected[fmt] = describe(full)

    # Files that must be refused.
    torch.save({"x": RunsACommand()}, os.path.join(case_dir("malicious"), "pytorch_model.bin"))
    torch.save({"model": sd, "epoch": 3},
               os.path.join(case_dir("nested"), "pytorch_model.bin"))
    src = os.path.join(ROOT, "state_dict", "pytorch_model.bin")
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(
            os.path.join(case_dir("compressed"), "pytorch_model.bin"), "w",
            zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info.filename))
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(
            os.path.join(case_dir("big_endian"), "pytorch_model.bin"), "w") as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info.filename))
        zout.writestr("pytorch_model/byteorder", "big")
    torch.save(sd, os.path.join(case_dir("legacy"), "pytorch_model.bin"),
               _use_new_zipfile_serialization=False)

    with open(os.path.join(ROOT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
