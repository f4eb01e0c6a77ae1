"""Implementations of the operator table: sequential (pure Python), vectorized (NumPy), cuda (CuPy kernels)."""
