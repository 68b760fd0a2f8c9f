package mgmtapi

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The XML Schema value forms the descriptions carry: xsd:duration for
// time spans (as .NET's XmlConvert writes a TimeSpan: "PT30S",
// "P14DT2H"), xsd:dateTime for times, xsd:boolean and decimal integers.

// unlimited is the longest duration raftbus handles, which stands for
// "no limit" (entities.proto).
const unlimited = time.Duration(math.MaxInt64)

// timeSpanMax is how Service Bus writes "no limit": .NET's
// TimeSpan.MaxValue. The SDKs show it as such and send it back in
// updates.
const timeSpanMax = "P10675199DT2H48M5.4775807S"

// formatDuration writes d as xsd:duration, the unlimited duration as
// TimeSpan.MaxValue.
func formatDuration(d time.Duration) string {
	if d == unlimited {
		return timeSpanMax
	}
	var b strings.Builder
	if d < 0 {
		b.WriteByte('-')
		d = -d
	}
	b.WriteByte('P')
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	if days > 0 {
		fmt.Fprintf(&b, "%dD", days)
	}
	if d == 0 {
		if days == 0 {
			b.WriteString("T0S")
		}
		return b.String()
	}
	b.WriteByte('T')
	if h := d / time.Hour; h > 0 {
		fmt.Fprintf(&b, "%dH", h)
		d -= h * time.Hour
	}
	if m := d / time.Minute; m > 0 {
		fmt.Fprintf(&b, "%dM", m)
		d -= m * time.Minute
	}
	if d > 0 {
		s := d / time.Second
		frac := d - s*time.Second
		b.WriteString(strconv.FormatInt(int64(s), 10))
		if frac > 0 {
			// Nanoseconds, trailing zeros trimmed.
			b.WriteString(strings.TrimRight(fmt.Sprintf(".%09d", frac), "0"))
		}
		b.WriteByte('S')
	}
	return b.String()
}

// parseDuration reads an xsd:duration. Years count 365 days and months
// 30, as .NET's XmlConvert reads them. A duration beyond the longest
// raftbus handles (TimeSpan.MaxValue, what Service Bus answers for "no
// limit", is one) is the unlimited one. Negative durations are refused:
// no setting takes one.
func parseDuration(s string) (time.Duration, error) {
	in := s
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("%q is negative", in)
	}
	rest, ok := strings.CutPrefix(s, "P")
	if !ok || rest == "" || strings.HasSuffix(rest, "T") {
		return 0, fmt.Errorf("%q is not an ISO 8601 duration such as PT30S or P1DT2H", in)
	}
	// The total in nanoseconds; past the int64 range it is the unlimited
	// duration.
	var exact int64
	overflow := false
	inTime := false
	units := "YMWD"
	for rest != "" {
		if rest[0] == 'T' {
			if inTime {
				return 0, fmt.Errorf("%q has two T separators", in)
			}
			inTime, units, rest = true, "HMS", rest[1:]
			continue
		}
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		if i == 0 || i == len(rest) {
			return 0, fmt.Errorf("%q is not an ISO 8601 duration such as PT30S or P1DT2H", in)
		}
		num, unit := rest[:i], rest[i]
		rest = rest[i+1:]
		at := strings.IndexByte(units, unit)
		if at < 0 {
			return 0, fmt.Errorf("%q: unit %q is out of place", in, unit)
		}
		units = units[at+1:] // each unit at most once, in order
		var per time.Duration
		switch {
		case !inTime && unit == 'Y':
			per = 365 * 24 * time.Hour
		case !inTime && unit == 'M':
			per = 30 * 24 * time.Hour
		case unit == 'W':
			per = 7 * 24 * time.Hour
		case unit == 'D':
			per = 24 * time.Hour
		case unit == 'H':
			per = time.Hour
		case inTime && unit == 'M':
			per = time.Minute
		case unit == 'S':
			per = time.Second
		}
		if strings.Contains(num, ".") && unit != 'S' {
			return 0, fmt.Errorf("%q: only seconds may have a fraction", in)
		}
		whole, frac, _ := strings.Cut(num, ".")
		if whole == "" || strings.Contains(frac, ".") {
			return 0, fmt.Errorf("%q: %q is not a number", in, num)
		}
		w, err := strconv.ParseInt(whole, 10, 64)
		if err != nil || w > math.MaxInt64/int64(per) {
			overflow = true
			continue
		}
		part := w * int64(per)
		if exact > math.MaxInt64-part {
			overflow = true
		}
		exact += part
		if frac != "" {
			if len(frac) > 9 {
				frac = frac[:9] // below a nanosecond
			}
			f, _ := strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
			if exact > math.MaxInt64-f {
				overflow = true
			}
			exact += f
		}
	}
	if overflow {
		return unlimited, nil
	}
	return time.Duration(exact), nil
}

// timeFormat is xsd:dateTime in UTC with up to seven fractional digits,
// as Service Bus writes times.
const timeFormat = "2006-01-02T15:04:05.9999999Z07:00"

// formatTime writes t; the zero time (never) as 0001-01-01T00:00:00Z,
// which is what Service Bus answers for an entity never accessed.
func formatTime(t time.Time) string {
	return t.UTC().Format(timeFormat)
}

// parseTime reads an xsd:dateTime; one without a zone is UTC.
func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a date and time such as 2024-01-02T03:04:05Z", s)
}

// parseBool reads an xsd:boolean: true, false, 1 or 0.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("%q is not true or false", s)
}

func formatBool(b bool) string { return strconv.FormatBool(b) }
