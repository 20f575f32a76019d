#!/usr/bin/env python3
"""(Re)creates examples/data/digits_{train,test}.csv and the same data as .npy files.

Source: the UCI "Optical Recognition of Handwritten Digits" data (E. Alpaydin and C. Kaynak, 1998,
CC BY 4.0) as Debian's python3-sklearn 1.2.1 ships it: sklearn/datasets/data/digits.csv.gz, 1797 rows of
64 pixel counts (0..16, an 8x8 image row by row) followed by the digit (0..9), no header.

The split is deterministic and stratified: the k-th row of each digit (k counted from 0 in file order)
goes to the test file when k % 5 == 4, else to the training file (1442 / 355 rows, every digit about 4:1).
Splitting on the row number alone would not do: the source cycles through the digits 0..9 for long
stretches, so every 5th row is mostly a 4 or a 9. Both files get a header line
(pixel_0_0, ..., pixel_7_7, digit), so the job file sets data.header: true; the label is the last column
(data.label_column: -1) and the pixels are scaled by data.feature_scale: 0.0625 (1/16).

The same rows are also written as NumPy .npy files for data.kind: npy (examples/digits/job_npy.yaml):
digits_{train,test}_inputs.npy, uint8 (N, 64), the pixels, and digits_{train,test}_targets.npy, int64 (N,),
the digits. They are written from the format's documented layout (numpy/lib/format.py: magic "\x93NUMPY",
version 1.0, a little-endian u16 header length, the header dict padded with spaces to a multiple of 64
bytes and ended by a newline, then the array's bytes in C order) with struct, so numpy is not needed.
With --from-csv the .npy files are made from the CSV files already in --out, without the source.

Usage:
  scripts/make_digits_data.py [--source PATH/TO/digits.csv.gz] [--out examples/data]
  scripts/make_digits_data.py --from-csv [--out examples/data]
Get the source with `apt-get download python3-sklearn && dpkg-deb -x python3-sklearn_*.deb skl`; the file
is then skl/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz.
"""
import argparse
import gzip
import struct
import sys
from pathlib import Path

DEFAULT_SOURCE = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
EXPECTED_ROWS = 1797
PIXELS = 64
TEST_EVERY = 5  # the k-th row of a digit goes to the test file when k % TEST_EVERY == TEST_EVERY - 1


def read_rows(source):
    rows = []
    with gzip.open(source, "rt") as f:
        for line_no, line in enumerate(f, start=1):
            line = line.strip()
            if not line:
                continue
            fields = [int(float(v)) for v in line.split(",")]
            if len(fields) != PIXELS + 1:
                sys.exit(f"{source}:{line_no}: {len(fields)} fields, expected {PIXELS + 1}")
            if not all(0 <= v <= 16 for v in fields[:PIXELS]) or not 0 <= fields[PIXELS] <= 9:
                sys.exit(f"{source}:{line_no}: a pixel outside 0..16 or a label outside 0..9")
            rows.append(fields)
    if len(rows) != EXPECTED_ROWS:
        sys.exit(f"{source}: {len(rows)} rows, expected {EXPECTED_ROWS}")
    return rows


def write_csv(path, rows):
    header = [f"pixel_{r}_{c}" for r in range(8) for c in range(8)] + ["digit"]
    with open(path, "w", newline="\n") as f:
        f.write(",".join(header) + "\n")
        for row in rows:
            f.write(",".join(str(v) for v in row) + "\n")


def read_csv(path):
    """The rows of a CSV file this script wrote (the header line skipped)."""
    with open(path) as f:
        lines = f.read().splitlines()[1:]
    return [[int(v) for v in line.split(",")] for line in lines if line]


def write_npy(path, descr, shape, payload):
    """A version 1.0 .npy file: the preamble, the header dict padded to 64 bytes, then `payload`."""
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")  # Python's (N,) for a 1-tuple
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': ({dims}), }}"
    preamble = 10  # magic (6), version (2), header length (2)
    header += " " * ((64 - (preamble + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY" + bytes([1, 0]) + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(payload)


def write_npy_pair(out, split, rows):
    n = len(rows)
    pixels = bytes(v for row in rows for v in row[:PIXELS])  # uint8, row by row
    digits = struct.pack(f"<{n}q", *(row[PIXELS] for row in rows))  # int64, little-endian
    write_npy(out / f"digits_{split}_inputs.npy", "|u1", (n, PIXELS), pixels)
    write_npy(out / f"digits_{split}_targets.npy", "<i8", (n,), digits)


def main():
    repo = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=DEFAULT_SOURCE, help="digits.csv.gz from python3-sklearn")
    parser.add_argument("--out", default=str(repo / "examples" / "data"), help="output folder")
    parser.add_argument("--from-csv", action="store_true",
                        help="write only the .npy files, from the CSV files in --out (no source needed)")
    args = parser.parse_args()
    out = Path(args.out)

    if args.from_csv:
        for split in ("train", "test"):
            rows = read_csv(out / f"digits_{split}.csv")
            write_npy_pair(out, split, rows)
            print(f"wrote {out}/digits_{split}_{{inputs,targets}}.npy ({len(rows)} rows)")
        return

    rows = read_rows(args.source)
    train, test = [], []
    seen = [0] * 10  # rows of each digit so far
    for row in rows:
        digit = row[PIXELS]
        (test if seen[digit] % TEST_EVERY == TEST_EVERY - 1 else train).append(row)
        seen[digit] += 1
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "digits_train.csv", train)
    write_csv(out / "digits_test.csv", test)
    print(f"wrote {out / 'digits_train.csv'} ({len(train)} rows) and {out / 'digits_test.csv'} ({len(test)} rows)")
    write_npy_pair(out, "train", train)
    write_npy_pair(out, "test", test)
    print(f"wrote {out}/digits_{{train,test}}_{{inputs,targets}}.npy")


if __name__ == "__main__":
    main()
