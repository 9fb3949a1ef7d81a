"""Dataset loaders: native records (JSONL/CSV/Parquet), BEIR folders, Natural Questions, PDFs,
and the public sets by name (SQuAD, HotpotQA, PubMedQA, SciFact)."""

from ragray.data.beir import load_beir
from ragray.data.loading import demo_path, detect_format, load_dataset
from ragray.data.named import DATA_DIR_ENV, PUBLIC_SETS, public_set_path
from ragray.data.nq import load_nq, parse_nq_rows
from ragray.data.pdf import load_pdf_folder
from ragray.data.records import find_corpus, load_records, read_corpus
from ragray.data.writing import write_records

__all__ = [
    "load_dataset",
    "detect_format",
    "demo_path",
    "load_records",
    "find_corpus",
    "read_corpus",
    "load_beir",
    "load_nq",
    "parse_nq_rows",
    "load_pdf_folder",
    "public_set_path",
    "PUBLIC_SETS",
    "DATA_DIR_ENV",
    "write_records",
]
