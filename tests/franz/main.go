// Scenarios with franz-go (github.com/twmb/franz-go), the Go client, for the integration tests
// (tests/integration/test_franz.py) and bench/churn-compare:
//
//	franz chain BOOTSTRAP VARIANT PREFIX RECORDS STAGES PARTITIONS MAX_MEMBERS POLL_PAUSE_MS TIMEOUT_S [txn]
//	    the churn chain of tests/java/ChurnChain.java (same steps and output lines), its
//	    RESULT line also counting the client's fetch session resets (session_resets=)
//	franz add-partitions BOOTSTRAP TOPIC
//	    a direct consumer of TOPIC (1 partition); partitions are added and the consumer told
//	    its metadata changed; prints "PICKED_UP <ms>" when a record produced to a new
//	    partition is read
//	franz skip-batch BOOTSTRAP TOPIC
//	    a consumer whose maximum decompressed batch size a gzip batch exceeds, seeking past the
//	    batch with the epoch and offset its error names; prints "SKIPPED <ms>" when the record
//	    after the batch is read
//
// Every scenario prints "ERROR <text>" and exits 1 when it fails, and "SESSION_RESETS <n>":
// the fetch session resets the client logged. With FRANZ_TRACE=1 the chain's clients also
// write their group timeline to stderr ("T <ms since start> <member> ..."): JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup and commit requests with the times they were sent and
// answered, the client's log lines about them, and the chain's steps.
package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	outMu         sync.Mutex
	failed        atomic.Bool
	sessionResets atomic.Int64
)

func out(format string, args ...any) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Printf(format+"\n", args...)
}

// traceGroups: with FRANZ_TRACE=1 in the environment, every client's group lifecycle (its
// log lines about joining, syncing, heartbeating, leaving, assignments and revocations) goes
// to stderr, each line with the milliseconds since the program started and the client's name,
// so that one churn step's timeline can be compared between brokers.
var (
	traceGroups = os.Getenv("FRANZ_TRACE") == "1"
	started     = time.Now()
)

// traceWords: the client log lines the trace keeps (kgo's debug level logs every request).
var traceWords = []string{"heartbeat", "join", "sync", "leav", "revok", "assign", "lost", "rebalanc",
	"session", "commit", "balanc"}

// trace prints one line of the trace (see traceGroups).
func trace(who, format string, args ...any) {
	if traceGroups {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(os.Stderr, "T %7d %s %s\n", time.Since(started).Milliseconds(), who, fmt.Sprintf(format, args...))
	}
}

// groupRequests: the request keys the trace's hook names (see traceHook).
var groupRequests = map[int16]string{8: "OffsetCommit", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup",
	14: "SyncGroup", 25: "AddOffsetsToTxn", 26: "EndTxn", 28: "TxnOffsetCommit"}

// traceHook prints, in the trace, when each group request of a client was written and when
// its response had been read.
type traceHook struct{ who string }

func (h traceHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	name, ok := groupRequests[key]
	if !ok || !traceGroups {
		return
	}
	end := time.Since(started)
	sent := end - e2e.DurationE2E()
	trace(h.who, "%s sent %d answered %d (%d ms)", name, sent.Milliseconds(), end.Milliseconds(),
		e2e.DurationE2E().Milliseconds())
}

// sessionLogger counts the client's fetch session resets and passes warnings and errors on to
// stderr; who names the client in the trace.
type sessionLogger struct{ who string }

func (sessionLogger) Level() kgo.LogLevel {
	if traceGroups {
		return kgo.LogLevelDebug
	}
	return kgo.LogLevelInfo
}

func (l sessionLogger) Log(level kgo.LogLevel, msg string, kv ...any) {
	if traceGroups {
		for _, w := range traceWords {
			if strings.Contains(strings.ToLower(msg), w) {
				trace(l.who, "%s %s %v", level, msg, kv)
				break
			}
		}
		if level > kgo.LogLevelInfo {
			return // the counts below are of what the client logs without the trace
		}
	}
	if strings.Contains(msg, "fetch session") || strings.Contains(msg, "SessionIDNotFound") ||
		strings.Contains(msg, "resetting session") {
		if sessionResets.Add(1) <= 5 {
			fmt.Fprintf(os.Stderr, "%s %s %v\n", level, msg, kv)
		}
		return
	}
	if level <= kgo.LogLevelWarn {
		fmt.Fprintf(os.Stderr, "%s %s %v\n", level, msg, kv)
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: franz chain|add-partitions|skip-batch ARGS...")
		os.Exit(2)
	}
	var code int
	start := time.Now()
	switch os.Args[1] {
	case "chain":
		code = runChain(os.Args[2:])
	case "add-partitions":
		code = runAddPartitions(os.Args[2:])
	case "skip-batch":
		code = runSkipBatch(os.Args[2:])
	default:
		fmt.Fprintln(os.Stderr, "unknown scenario", os.Args[1])
		code = 2
	}
	out("SESSION_RESETS %d", sessionResets.Load())
	fmt.Fprintf(os.Stderr, "%s took %s\n", os.Args[1], time.Since(start).Round(time.Millisecond))
	os.Exit(code)
}
