#!/bin/sh
# Build the component: app.py + the sandcrab WIT -> {{crate}}.wasm
set -e
cd "$(dirname "$0")"
componentize-py -d wit -w tool-plugin componentize app -o {{crate}}.wasm
