// A plain progressive-filling max-min solver, the peer of bench/flowsim_bench.py: each round finds
// the least fair share residual / active over the links that still have rising flows, and freezes
// every rising flow of every link at that share. No heap, no incremental bookkeeping beyond the
// residuals: O(rounds x (links + hops)). Reads "L F", L capacities, then per flow "n l1 .. ln";
// prints the solve time (excluding input) and the rates.
#include <chrono>
#include <cstdio>
#include <vector>

int main() {
    int L, F;
    if (scanf("%d %d", &L, &F) != 2) return 1;
    std::vector<double> cap(L);
    for (auto& c : cap)
        if (scanf("%lf", &c) != 1) return 1;
    std::vector<int> off(F + 1, 0), links;
    for (int f = 0; f < F; f++) {
        int n;
        if (scanf("%d", &n) != 1) return 1;
        for (int i = 0; i < n; i++) {
            int l;
            if (scanf("%d", &l) != 1) return 1;
            links.push_back(l);
        }
        off[f + 1] = (int)links.size();
    }
    auto t0 = std::chrono::steady_clock::now();
    // Flows of each link (CSR).
    std::vector<int> lstart(L + 1, 0), lflows(links.size());
    for (int l : links) lstart[l + 1]++;
    for (int l = 0; l < L; l++) lstart[l + 1] += lstart[l];
    std::vector<int> fill(lstart.begin(), lstart.end() - 1);
    for (int f = 0; f < F; f++)
        for (int i = off[f]; i < off[f + 1]; i++) lflows[fill[links[i]]++] = f;
    std::vector<double> residual(cap), rate(F, -1.0);
    std::vector<int> active(L);
    for (int l = 0; l < L; l++) active[l] = lstart[l + 1] - lstart[l];
    int left = F;
    while (left > 0) {
        double best = 1e300;
        for (int l = 0; l < L; l++)
            if (active[l] > 0 && residual[l] / active[l] < best) best = residual[l] / active[l];
        for (int l = 0; l < L; l++) {
            if (active[l] == 0 || residual[l] / active[l] > best * (1 + 1e-12)) continue;
            for (int k = lstart[l]; k < lstart[l + 1]; k++) {
                int f = lflows[k];
                if (rate[f] >= 0) continue;
                rate[f] = best;
                left--;
                for (int i = off[f]; i < off[f + 1]; i++) {
                    residual[links[i]] -= best;
                    active[links[i]]--;
                }
            }
        }
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    printf("%.6f\n", ms);
    for (int f = 0; f < F; f++) printf("%.17g\n", rate[f]);
    return 0;
}
