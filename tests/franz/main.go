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
// the fetch session resets the client logged.
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

// sessionLogger counts the client's fetch session resets and passes warnings and errors on to
// stderr.
type sessionLogger struct{}

func (sessionLogger) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (sessionLogger) Log(level kgo.LogLevel, msg string, kv ...any) {
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
