from .samplers import get_sampler
