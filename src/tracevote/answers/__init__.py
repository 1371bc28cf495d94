"""Final answers of model outputs: extraction from text, and the answer formats of each dataset."""
