// ROS 2 message schemas for MCAP, in the `ros2msg` encoding that rosbag2 writes: the root .msg
// text, then each dependency (depth first, each once, in sorted order) after a line of 80 '=' and
// a `MSG: pkg/Name` line. The header names the dependency the way its field spells the type
// (`std_msgs/Header`, not `std_msgs/msg/Header`), as rosbag2 does; @foxglove/rosmsg matches the
// two exactly, so the `pkg/msg/Name` spelling would not parse there.
// The definitions come from @foxglove/rosmsg-msgs-common (ROS 2 Jazzy), not from copies here.

import type { MessageDefinition, MessageDefinitionField } from '@foxglove/message-definition';
import { parse } from '@foxglove/rosmsg';
import { MessageWriter } from '@foxglove/rosmsg2-serialization';
import { ros2jazzy } from '@foxglove/rosmsg-msgs-common';

const DELIMITER = '='.repeat(80);
const definitions = ros2jazzy as unknown as Record<string, MessageDefinition>;

/** `sensor_msgs/msg/JointState` → `sensor_msgs/JointState` (the key in the definitions). */
export function shortName(type: string): string {
  const parts = type.split('/');
  return parts.length === 3 && parts[1] === 'msg' ? `${parts[0]}/${parts[2]}` : type;
}

/** `sensor_msgs/JointState` → `sensor_msgs/msg/JointState` (the MCAP schema name). */
export function fullName(type: string): string {
  const parts = type.split('/');
  return parts.length === 2 ? `${parts[0]}/msg/${parts[1]}` : type;
}

// The definitions normalize builtin_interfaces/Time to `time`; a .msg file names the message.
function fieldType(f: MessageDefinitionField): string {
  if (f.type === 'time') return 'builtin_interfaces/Time';
  if (f.type === 'duration') return 'builtin_interfaces/Duration';
  return f.type;
}

function literal(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(literal).join(', ')}]`;
  if (typeof v === 'string') return JSON.stringify(v);
  return String(v);
}

function fieldLine(f: MessageDefinitionField): string {
  let type = fieldType(f);
  if (f.upperBound !== undefined) type += `<=${f.upperBound}`;
  if (f.isConstant === true) return `${type} ${f.name}=${f.valueText ?? String(f.value)}`;
  if (f.isArray === true) {
    type += f.arrayLength !== undefined ? `[${f.arrayLength}]` : f.arrayUpperBound !== undefined ? `[<=${f.arrayUpperBound}]` : '[]';
  }
  return f.defaultValue === undefined ? `${type} ${f.name}` : `${type} ${f.name} ${literal(f.defaultValue)}`;
}

function lookup(type: string): MessageDefinition {
  const def = definitions[shortName(type)];
  if (def === undefined) throw new Error(`no ROS 2 Jazzy definition for ${type} in @foxglove/rosmsg-msgs-common`);
  return def;
}

/** The complete `ros2msg` schema text for a type, e.g. `sensor_msgs/msg/JointState`. */
export function ros2msgSchema(type: string): string {
  const seen = new Set<string>();
  const render = (def: MessageDefinition): string => {
    let text = def.definitions.map(fieldLine).join('\n') + '\n';
    const deps = [...new Set(def.definitions.filter((f) => f.isConstant !== true && (f.isComplex === true || f.type === 'time' || f.type === 'duration')).map(fieldType))].sort();
    for (const dep of deps) {
      if (seen.has(dep)) continue;
      seen.add(dep);
      text += `${DELIMITER}\nMSG: ${dep}\n${render(lookup(dep))}`;
    }
    return text;
  };
  return render(lookup(type));
}

/**
 * Parses `ros2msg` schema text. Accepts dependency headers spelled `MSG: pkg/msg/Name` too (the
 * rosbag2 design document's spelling) by rewriting them to the `pkg/Name` the fields use.
 */
export function parseRos2msg(text: string): MessageDefinition[] {
  const normalized = text.replace(/^(\s*MSG:\s*)([A-Za-z][\w]*)\/msg\/([A-Za-z]\w*)/gm, '$1$2/$3');
  return parse(normalized, { ros2: true });
}

/** Schema text and a CDR writer for each message type the exporter uses. */
export interface SchemaCodec {
  name: string;
  text: string;
  writer: MessageWriter;
}

const codecs = new Map<string, SchemaCodec>();

export function codecFor(type: string): SchemaCodec {
  let c = codecs.get(type);
  if (c === undefined) {
    const text = ros2msgSchema(type);
    // The writer is built from the text we embed, so a file's schema and its bytes cannot drift.
    c = { name: fullName(type), text, writer: new MessageWriter(parseRos2msg(text)) };
    codecs.set(type, c);
  }
  return c;
}
