import torch


def segment_max(x, lengths):
    ids = torch.repeat_interleave(torch.arange(len(lengths), device=x.device), lengths)
    out = torch.full((len(lengths), x.shape[1]), float("-inf"), device=x.device, dtype=x.dtype)
    return out.scatter_reduce(0, ids[:, None].expand_as(x), x, reduce="amax")
