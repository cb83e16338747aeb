"""Throughput of the content-defined chunkers on PyPI that snapstore could use, on the same
random bytes, in one run: ``pyfastcdc`` (FastCDC 2020, Cython) through a buffer and through a
stream, and ``fastcdc`` (FastCDC 2016, Cython). A library that is not installed is skipped.

    python bench/chunkers.py [--mib 256] [--avg-kib 64 256 1024]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable


def _pyfastcdc_buffer(data: bytes, avg: int) -> int:
    import pyfastcdc

    return sum(1 for _ in pyfastcdc.FastCDC(avg).cut_buf(data))


def _pyfastcdc_stream(data: bytes, avg: int) -> int:
    import io

    import pyfastcdc

    return sum(1 for _ in pyfastcdc.FastCDC(avg).cut_stream(io.BytesIO(data)))


def _fastcdc_2016(data: bytes, avg: int) -> int:
    from fastcdc.fastcdc_cy import fastcdc_cy

    return sum(1 for _ in fastcdc_cy(data, avg // 4, avg, avg * 4, fat=False, hf=None))


def _blake3_baseline(data: bytes, avg: int) -> int:
    import blake3

    blake3.blake3(data).digest()
    return 1


CHUNKERS: dict[str, Callable[[bytes, int], int]] = {
    "blake3 (hash only, baseline)": _blake3_baseline,
    "pyfastcdc cut_buf": _pyfastcdc_buffer,
    "pyfastcdc cut_stream": _pyfastcdc_stream,
    "fastcdc (2016) fastcdc_cy": _fastcdc_2016,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--avg-kib", type=int, nargs="+", default=[64, 256, 1024])
    args = parser.parse_args()
    data = os.urandom(args.mib << 20)
    for avg_kib in args.avg_kib:
        for name, chunker in CHUNKERS.items():
            try:
                start = time.perf_counter()
                count = chunker(data, avg_kib << 10)
                elapsed = time.perf_counter() - start
            except ImportError:
                print(f"{name:32} not installed, skipped")
                continue
            mib_s = args.mib / elapsed
            print(f"avg {avg_kib:5} KiB  {name:32} {mib_s:8.0f} MiB/s  {count:6} chunks")


if __name__ == "__main__":
    main()
