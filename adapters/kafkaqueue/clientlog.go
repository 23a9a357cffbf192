package kafkaqueue

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// clientLog is franz-go's logger over the queue's slog logger, at warn and
// above: a failed commit, a lost session, a broker refusing a request are
// an operator's business; a rebalance's every step is not.
type clientLog struct{ log *slog.Logger }

func (l clientLog) Level() kgo.LogLevel {
	if !l.log.Enabled(context.Background(), slog.LevelWarn) {
		return kgo.LogLevelNone
	}
	return kgo.LogLevelWarn
}

func (l clientLog) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelWarn
	if level == kgo.LogLevelError {
		lv = slog.LevelError
	}
	l.log.Log(context.Background(), lv, "kafka client: "+msg, keyvals...)
}
