def entropy_rows(logits):
    p = logits.softmax(-1)
    return -(p * logits.log_softmax(-1)).sum(-1)
