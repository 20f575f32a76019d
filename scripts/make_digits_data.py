#!/usr/bin/env python3
"""(Re)creates examples/data/digits_train.csv and examples/data/digits_test.csv.

Source: the UCI "Optical Recognition of Handwritten Digits" data (E. Alpaydin and C. Kaynak, 1998,
CC BY 4.0) as Debian's python3-sklearn 1.2.1 ships it: sklearn/datasets/data/digits.csv.gz, 1797 rows of
64 pixel counts (0..16, an 8x8 image row by row) followed by the digit (0..9), no header.

The split is deterministic and stratified: the k-th row of each digit (k counted from 0 in file order)
goes to the test file when k % 5 == 4, else to the training file (1442 / 355 rows, every digit about 4:1).
Splitting on the row number alone would not do: the source cycles through the digits 0..9 for long
stretches, so every 5th row is mostly a 4 or a 9. Both files get a header line
(pixel_0_0, ..., pixel_7_7, digit), so the job file sets data.header: true; the label is the last column
(data.label_column: -1) and the pixels are scaled by data.feature_scale: 0.0625 (1/16).

Usage:
  scripts/make_digits_data.py [--source PATH/TO/digits.csv.gz] [--out examples/data]
Get the source with `apt-get download python3-sklearn && dpkg-deb -x python3-sklearn_*.deb skl`; the file
is then skl/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz.
"""
import argparse
import gzip
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


def main():
    repo = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=DEFAULT_SOURCE, help="digits.csv.gz from python3-sklearn")
    parser.add_argument("--out", default=str(repo / "examples" / "data"), help="output folder")
    args = parser.parse_args()

    rows = read_rows(args.source)
    train, test = [], []
    seen = [0] * 10  # rows of each digit so far
    for row in rows:
        digit = row[PIXELS]
        (test if seen[digit] % TEST_EVERY == TEST_EVERY - 1 else train).append(row)
        seen[digit] += 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "digits_train.csv", train)
    write_csv(out / "digits_test.csv", test)
    print(f"wrote {out / 'digits_train.csv'} ({len(train)} rows) and {out / 'digits_test.csv'} ({len(test)} rows)")


if __name__ == "__main__":
    main()
