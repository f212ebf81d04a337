"""Quantization: PT2E graph quantization per backend scheme (graph_quantize) and eager algorithms (advanced_quantize)."""
