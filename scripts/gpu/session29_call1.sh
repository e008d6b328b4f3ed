set -u
export OUT=${OUT}
S=scripts/gpu/run-on-device.sh
KEEP_FILES=1 STEPS=tests TEST_LIMIT=150 TEST_FILTER='GpuOps.Gemv*:*gemm_row*:GpuL2.Persistence*:GpuStreamGate.*:GpuGemmPlan.*' SCHED_TEST_FILTER='CudaSideFlag.*:CudaL2Persistence.*' bash $S
for r in 1 2; do for g in 0 1; do
 ATOLL_CUDA_GEMV=$g KEEP_FILES=1 STEPS=bench BENCH_LIMIT=90 BENCH_TAG=_gemv${g}_$r BENCH_ARGS="--models vgg19 resnet50 --batches 1 8 --top 3" bash $S 2>&1 | grep -vE "^ *$" | tail -14 | sed "s/^/gemv$g r$r: /"
done; done
STEPS=disb DISB_WORKLOADS=B DISB_SECONDS=30 DISB_MODES=rt-only,reset DISB_AB=ATOLL_CUDA_SIDE_FLAG bash $S 2>&1 | tail -30
