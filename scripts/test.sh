#!/usr/bin/env bash
# test.sh — the test command: on a fresh Debian machine it installs what is missing,
# builds tapegrad and runs the whole suite under ctest.
# One test compares our tokenizer.json with the Hugging Face `tokenizers` library (from PyPI, in a
# venv under build/hf-venv); when PyPI cannot be reached that test is skipped, not failed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
if [[ ! -x build/hf-venv/bin/python3 ]]; then
  if ! (python3 -m venv build/hf-venv && timeout 300 build/hf-venv/bin/pip install -q tokenizers) >build/hf-venv.log 2>&1; then
    echo "test.sh: could not install Hugging Face tokenizers into build/hf-venv (see build/hf-venv.log): its test will be skipped" >&2
    rm -rf build/hf-venv
  fi
fi
cd build
ctest --output-on-failure -j"$(nproc)"
