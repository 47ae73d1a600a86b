#!/usr/bin/env python3
"""Records the expected ids of tests/test_tokenizer_llamacpp.c with llama.cpp's own tokenizer.

usage: record.py BUILD_DIR LLAMA_TOKENIZE

Runs the test once (it writes its vocabularies to BUILD_DIR/tmp/<pid>-tokvec-NAME.gguf; a missing or
stale .out only makes it fail), then tokenizes every text of texts.inp with
`LLAMA_TOKENIZE -m NAME.gguf --ids --no-bos --no-escape [--no-parse-special]` and writes NAME.out, one
line of space-separated ids per text. The SentencePiece variants (spm-*) parse special tokens, as the
test does."""
import glob, os, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
build, llama_tokenize = sys.argv[1], sys.argv[2]
for old in glob.glob(os.path.join(build, 'tmp', '*-tokvec-*.gguf')):
    os.remove(old)
subprocess.run([os.path.join(build, 'tests', 'test_tokenizer_llamacpp')], capture_output=True)
texts = open(os.path.join(here, 'texts.inp'), 'rb').read().split(b'\n__ggml_vocab_test__\n')[:-1]
vocabs = {}
for path in glob.glob(os.path.join(build, 'tmp', '*-tokvec-*.gguf')):
    vocabs[path.split('-tokvec-', 1)[1][:-len('.gguf')]] = path
for name, path in sorted(vocabs.items()):
    lines = []
    for text in texts:
        with tempfile.NamedTemporaryFile(delete=False) as f:
            f.write(text)
        args = [llama_tokenize, '-m', path, '-f', f.name, '--ids', '--no-bos', '--no-escape', '--log-disable']
        if not name.startswith('spm-'):
            args.append('--no-parse-special')
        r = subprocess.run(args, capture_output=True, check=True)
        os.remove(f.name)
        ids = r.stdout.decode().strip().strip('[]').replace(',', ' ').split()
        lines.append(' '.join(ids))
    with open(os.path.join(here, name + '.out'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print(name, len(lines), 'texts')
    os.remove(path)
