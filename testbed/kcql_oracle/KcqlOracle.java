// Lenses' KCQL parser (com.datamountaineer:kcql) as an oracle for tests/unit/kcql/test_lenses_parity.py.
//
// Reads statements from stdin, one JSON string per line, and prints for each one JSON object
// per line: {"ok": false, "error": "..."} when Kcql.parse throws, else what the parsed Kcql
// says (source, target, fields, ignored fields, PARTITIONBY, STOREAS and its parameters,
// WITH_FLUSH_*, WITHPARTITIONER, PROPERTIES). One JVM serves a whole test session.

import com.datamountaineer.kcql.Field;
import com.datamountaineer.kcql.Kcql;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

public final class KcqlOracle {
  private KcqlOracle() {}

  public static void main(String[] args) throws Exception {
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    PrintWriter out =
        new PrintWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), false);
    String line;
    while ((line = in.readLine()) != null) {
      if (line.isEmpty()) {
        continue;
      }
      out.println(read(decode(line)));
      out.flush();
    }
  }

  static String read(String statement) {
    Kcql kcql;
    try {
      kcql = Kcql.parse(statement);
    } catch (Throwable e) {
      return "{\"ok\":false,\"error\":" + quote(e.getClass().getSimpleName() + ": " + e.getMessage()) + "}";
    }
    StringBuilder b = new StringBuilder("{\"ok\":true");
    b.append(",\"source\":").append(quote(kcql.getSource()));
    b.append(",\"target\":").append(quote(kcql.getTarget()));
    b.append(",\"write_mode\":").append(quote(String.valueOf(kcql.getWriteMode())));
    b.append(",\"fields\":").append(fields(kcql.getFields()));
    b.append(",\"ignored_fields\":").append(fields(kcql.getIgnoredFields()));
    b.append(",\"key_fields\":").append(fields(kcql.getKeyFields()));
    b.append(",\"header_fields\":").append(fields(kcql.getHeaderFields()));
    List<String> partitions = new ArrayList<>();
    for (Iterator<String> it = kcql.getPartitionBy(); it.hasNext(); ) {
      partitions.add(it.next());
    }
    b.append(",\"partition_by\":").append(strings(partitions));
    b.append(",\"stored_as\":").append(quote(kcql.getStoredAs()));
    b.append(",\"stored_as_parameters\":").append(map(kcql.getStoredAsParameters()));
    b.append(",\"flush_count\":").append(kcql.getWithFlushCount());
    b.append(",\"flush_size\":").append(kcql.getWithFlushSize());
    b.append(",\"flush_interval\":").append(kcql.getWithFlushInterval());
    b.append(",\"partitioner\":").append(quote(kcql.getWithPartitioner()));
    b.append(",\"properties\":").append(map(kcql.getProperties()));
    return b.append('}').toString();
  }

  static String fields(List<Field> fields) {
    if (fields == null) {
      return "null";
    }
    StringBuilder b = new StringBuilder("[");
    for (Field f : fields) {
      if (b.length() > 1) {
        b.append(',');
      }
      b.append("{\"name\":").append(quote(f.getName()));
      b.append(",\"alias\":").append(quote(f.getAlias()));
      b.append(",\"type\":").append(quote(String.valueOf(f.getFieldType())));
      b.append(",\"parents\":").append(strings(f.getParentFields())).append('}');
    }
    return b.append(']').toString();
  }

  static String strings(List<String> values) {
    if (values == null) {
      return "null";
    }
    StringBuilder b = new StringBuilder("[");
    for (String v : values) {
      if (b.length() > 1) {
        b.append(',');
      }
      b.append(quote(v));
    }
    return b.append(']').toString();
  }

  static String map(Map<String, String> values) {
    if (values == null) {
      return "null";
    }
    StringBuilder b = new StringBuilder("{");
    for (Map.Entry<String, String> e : new TreeMap<>(values).entrySet()) {
      if (b.length() > 1) {
        b.append(',');
      }
      b.append(quote(e.getKey())).append(':').append(quote(e.getValue()));
    }
    return b.append('}').toString();
  }

  static String quote(String s) {
    if (s == null) {
      return "null";
    }
    StringBuilder b = new StringBuilder("\"");
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"' || c == '\\') {
        b.append('\\').append(c);
      } else if (c < 0x20 || c > 0x7e) {
        b.append(String.format("\\u%04x", (int) c));
      } else {
        b.append(c);
      }
    }
    return b.append('"').toString();
  }

  /** The string of one JSON string literal (the whole line). */
  static String decode(String json) {
    if (json.length() < 2 || json.charAt(0) != '"' || json.charAt(json.length() - 1) != '"') {
      throw new IllegalArgumentException("expected one JSON string per line");
    }
    StringBuilder b = new StringBuilder();
    for (int i = 1; i < json.length() - 1; i++) {
      char c = json.charAt(i);
      if (c != '\\') {
        b.append(c);
        continue;
      }
      char e = json.charAt(++i);
      switch (e) {
        case 'n': b.append('\n'); break;
        case 'r': b.append('\r'); break;
        case 't': b.append('\t'); break;
        case 'b': b.append('\b'); break;
        case 'f': b.append('\f'); break;
        case 'u': b.append((char) Integer.parseInt(json.substring(i + 1, i + 5), 16)); i += 4; break;
        default: b.append(e);
      }
    }
    return b.toString();
  }
}
