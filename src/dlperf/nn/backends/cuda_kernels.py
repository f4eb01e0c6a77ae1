"""CUDA C source of the cuda backend's kernels (float64), compiled at run time by CuPy (NVRTC).

Kept apart from `cuda.py` so that its compilation can be checked with nvcc on a
machine without a GPU or CuPy. One thread per output element unless noted.
"""

SOURCE = r"""
extern "C" {

// out[i] = op(a[i % na], b[i % nb]) for i < n = max(na, nb): equal shapes, a scalar,
// or a row vector broadcast over the last (contiguous) dimension.
__global__ void ewise_binary(const double* a, const double* b, double* out, long long n, long long na,
                             long long nb, int op) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = a[i % na], y = b[i % nb];
    double r;
    switch (op) {
        case 0: r = x + y; break;
        case 1: r = x - y; break;
        case 2: r = x * y; break;
        case 3: r = x / y; break;
        default: r = x >= y ? x : y; break;
    }
    out[i] = r;
}

__global__ void ewise_unary(const double* a, double* out, long long n, int op) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = a[i];
    out[i] = op == 0 ? exp(x) : (op == 1 ? log(x) : (x > 0.0 ? x : 0.0));
}

__global__ void relu_grad(const double* a, const double* g, double* out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] > 0.0 ? g[i] : 0.0;
}

// C (M x N) = A (M x K) @ B (K x N), row-major, 16 x 16 tiles staged in shared memory.
#define TILE 16
__global__ void matmul_tiled(const double* A, const double* B, double* C, int M, int N, int K) {
    __shared__ double As[TILE][TILE];
    __shared__ double Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    double acc = 0.0;
    for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
        int ka = t * TILE + threadIdx.x, kb = t * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? A[(long long)row * K + ka] : 0.0;
        Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? B[(long long)kb * N + col] : 0.0;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[(long long)row * N + col] = acc;
}

__global__ void transpose(const double* a, double* out, int rows, int cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)rows * cols) return;
    int r = i / cols, c = i % cols;
    out[(long long)c * rows + r] = a[i];
}

// out[n,k,i,j] = sum_{c,u,v} x[n,c,i*s+u-p, j*s+v-p] * w[k,c,u,v]
__global__ void conv2d_fwd(const double* x, const double* w, double* out, int N, int C, int H, int W, int K,
                           int R, int S, int Ho, int Wo, int stride, int pad) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)N * K * Ho * Wo) return;
    int j = idx % Wo, i = (idx / Wo) % Ho, k = (idx / ((long long)Wo * Ho)) % K, n = idx / ((long long)Wo * Ho * K);
    double acc = 0.0;
    for (int c = 0; c < C; ++c)
        for (int u = 0; u < R; ++u) {
            int y = i * stride + u - pad;
            if (y < 0 || y >= H) continue;
            for (int v = 0; v < S; ++v) {
                int xx = j * stride + v - pad;
                if (xx < 0 || xx >= W) continue;
                acc += x[(((long long)n * C + c) * H + y) * W + xx] * w[(((long long)k * C + c) * R + u) * S + v];
            }
        }
    out[idx] = acc;
}

// dx[n,c,y,xx] = sum over taps (k,u,v) whose output position (i,j) lands on (y,xx)
__global__ void conv2d_grad_input(const double* g, const double* w, double* dx, int N, int C, int H, int W,
                                  int K, int R, int S, int Ho, int Wo, int stride, int pad) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)N * C * H * W) return;
    int xx = idx % W, y = (idx / W) % H, c = (idx / ((long long)W * H)) % C, n = idx / ((long long)W * H * C);
    double acc = 0.0;
    for (int k = 0; k < K; ++k)
        for (int u = 0; u < R; ++u) {
            int ti = y + pad - u;
            if (ti < 0 || ti % stride != 0) continue;
            int i = ti / stride;
            if (i >= Ho) continue;
            for (int v = 0; v < S; ++v) {
                int tj = xx + pad - v;
                if (tj < 0 || tj % stride != 0) continue;
                int j = tj / stride;
                if (j >= Wo) continue;
                acc += g[(((long long)n * K + k) * Ho + i) * Wo + j] * w[(((long long)k * C + c) * R + u) * S + v];
            }
        }
    dx[idx] = acc;
}

// dw[k,c,u,v] = sum_{n,i,j} g[n,k,i,j] * x[n,c,i*s+u-p, j*s+v-p]
__global__ void conv2d_grad_weight(const double* g, const double* x, double* dw, int N, int C, int H, int W,
                                   int K, int R, int S, int Ho, int Wo, int stride, int pad) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)K * C * R * S) return;
    int v = idx % S, u = (idx / S) % R, c = (idx / ((long long)S * R)) % C, k = idx / ((long long)S * R * C);
    double acc = 0.0;
    for (int n = 0; n < N; ++n)
        for (int i = 0; i < Ho; ++i) {
            int y = i * stride + u - pad;
            if (y < 0 || y >= H) continue;
            for (int j = 0; j < Wo; ++j) {
                int xx = j * stride + v - pad;
                if (xx < 0 || xx >= W) continue;
                acc += g[(((long long)n * K + k) * Ho + i) * Wo + j] * x[(((long long)n * C + c) * H + y) * W + xx];
            }
        }
    dw[idx] = acc;
}

// k x k max pool; arg holds the flat index (u * k + v) of the first maximum in each window.
__global__ void maxpool_fwd(const double* x, double* out, long long* arg, int N, int C, int H, int W, int k,
                            int stride, int Ho, int Wo) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)N * C * Ho * Wo) return;
    int j = idx % Wo, i = (idx / Wo) % Ho;
    long long nc = idx / ((long long)Wo * Ho);
    const double* base = x + nc * H * W;
    double best = -1.0 / 0.0;
    int best_at = 0;
    for (int u = 0; u < k; ++u)
        for (int v = 0; v < k; ++v) {
            double val = base[(i * stride + u) * W + (j * stride + v)];
            if (val > best) { best = val; best_at = u * k + v; }
        }
    out[idx] = best;
    arg[idx] = best_at;
}

// Overlapping windows can pick the same input: accumulate atomically (double atomicAdd: sm_60+).
__global__ void maxpool_grad(const double* g, const long long* arg, double* dx, int N, int C, int H, int W,
                             int k, int stride, int Ho, int Wo) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)N * C * Ho * Wo) return;
    int j = idx % Wo, i = (idx / Wo) % Ho;
    long long nc = idx / ((long long)Wo * Ho);
    int u = arg[idx] / k, v = arg[idx] % k;
    atomicAdd(dx + nc * H * W + (i * stride + u) * W + (j * stride + v), g[idx]);
}

// One thread per row: loss_rows[r] = -log softmax(logits[r])[label], grad[r] = (softmax - onehot) / n.
__global__ void softmax_ce(const double* logits, const long long* labels, double* loss_rows, double* grad,
                           int n, int classes) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    const double* z = logits + (long long)r * classes;
    double m = z[0];
    for (int c = 1; c < classes; ++c) m = z[c] > m ? z[c] : m;
    double total = 0.0;
    for (int c = 0; c < classes; ++c) total += exp(z[c] - m);
    long long t = labels[r];
    loss_rows[r] = -((z[t] - m) - log(total));
    for (int c = 0; c < classes; ++c)
        grad[(long long)r * classes + c] = (exp(z[c] - m) / total - (c == t ? 1.0 : 0.0)) / n;
}

}  // extern "C"
"""

KERNELS = ("ewise_binary", "ewise_unary", "relu_grad", "matmul_tiled", "transpose", "conv2d_fwd",
           "conv2d_grad_input", "conv2d_grad_weight", "maxpool_fwd", "maxpool_grad", "softmax_ce")
