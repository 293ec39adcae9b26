package attribution

import "github.com/cacheheat/cacheheat/metric"

// The rules' own metrics: what a threshold holds besides the catalogue's
// derived metrics and event rates (package metric). Each is one rule's
// vocabulary, named once here and used by its table row and its eval.
const (
	mSamples              metric.ID = "samples"
	mTopCoreSampleShare   metric.ID = "top core share of samples"
	mWritebackPerLoad     metric.ID = "write-back/load"
	mNodeLLCMissRate      metric.ID = "LLC-load-misses/s on the node"
	mTopCoreNodeMissShare metric.ID = "top core share of the node's misses"
	mTopCoreDemand        metric.ID = "top core demand"
	mLeastBusyOther       metric.ID = "least busy other core"
	mRunqEvents           metric.ID = "run-queue events per window"
	mRunqP99              metric.ID = "runq-latency p99"
	mSaturatedShare       metric.ID = "share of windows saturated"
	mRunnablePerCPU       metric.ID = "runnable threads per allowed CPU"
	mWorkingThreads       metric.ID = "working threads"
	mTargetBusy           metric.ID = "target on-CPU share of the allowed CPUs"
	mOthersShare          metric.ID = "other processes' share of the allowed CPUs"
	mLockWaitShare        metric.ID = "lock wait share"
	mLockWaitRate         metric.ID = "lock wait per second"
	mIOWaitShare          metric.ID = "I/O wait share"
	mIOWaitRate           metric.ID = "I/O wait per second"
	mStartupIOShare       metric.ID = "start-up disk I/O share"
	mStartupIORate        metric.ID = "start-up disk I/O per second of its windows"
	mPeerWaitShare        metric.ID = "share waiting on other processes or the network"
	mPeerWaitRate         metric.ID = "wait on other processes or the network per second"
	mMigrationsPerThread  metric.ID = "cpu-migrations per thread"
	mEventsPerWindow      metric.ID = "events per window"
	mEnoughWindows        metric.ID = "windows with enough events"
	mTailP99              metric.ID = "tail window p99"
	mTailWindows          metric.ID = "tail windows"
	mTailOverMedian       metric.ID = "tail p99 over median window p99"
	mCauseOverMedian      metric.ID = "cause rate over median window"
	mCauseExcess          metric.ID = "cause rate excess"
	mCalls                metric.ID = "calls"
	mTailMeanOverMedian   metric.ID = "tail mean over median mean"
	mTailCounted          metric.ID = "tail calls with counters"
	mCausePerCallRatio    metric.ID = "cause per call, tail over median"
	mCausePerCallExcess   metric.ID = "cause per call, tail minus median"
)

// Event rates the rules hold to a floor.
var (
	rateInstructions = metric.Rate(metric.Instructions)
	rateNodeLoads    = metric.Rate(metric.NodeLoads)
	ratePageFaults   = metric.Rate(metric.PageFaults)
)
