"""A stand-in for torch.distributed.GradBucket, so that PyTorch's own comm
hooks can be called on exactly the buckets libddp's reducer formed."""


class GradBucket:
    def __init__(self, buffer, index, is_last, shapes=None):
        """shapes: the bucket's gradient shapes in order (for gradients())."""
        self._buffer, self._index, self._last, self._shapes = buffer, index, is_last, shapes

    def buffer(self):
        return self._buffer

    def set_buffer(self, b):  # the fp16/bf16 wrappers swap in a compressed buffer
        self._buffer = b

    def index(self):
        return self._index

    def is_last(self):
        return self._last

    def gradients(self):
        """Views into the current buffer, as GradBucket.gradients() gives."""
        out, at = [], 0
        for shape in self._shapes:
            n = 1
            for d in shape:
                n *= d
            out.append(self._buffer[at:at + n].view(shape))
            at += n
        return out
