// What a specification says (API guide 8): the sensor keys it may hold ranges for, the shape of its
// ranges, notification timings and set points, as TypeBox schemas and their types. The routes
// validate with them; the evaluation reads the values. Depends on nothing of the alerts module.
import { type Static, type TSchema, Type } from '@sinclair/typebox';
import { Nullable, Str } from '../http/schemas.js';

export const CARGO_SENSORS = [
  'airExchange',
  'co2',
  'co',
  'o2',
  'ethylene',
  'nitrogen',
  'humidity',
  'ambientTemperature',
  'returnAirTemperature',
  'returnAir2Temperature',
  'supplyAirTemperature',
  'supplyAir2Temperature',
  'usda1Temperature',
  'usda2Temperature',
  'usda3Temperature',
  'usda4Temperature',
] as const;
export const HARDWARE_SENSORS = [
  'batteryVoltage',
  'compressorTemperature',
  'compressorFrequency',
  'condenserPressure',
  'condenserTemperature',
  'condenserFanLevel',
  'evaporatorTemperature',
  'evaporatorFanLevel',
  'currentA',
  'currentB',
  'currentC',
  'currentTotal',
  'defrostTemperature',
  'dischargePressure',
  'dischargeTemperature',
  'engineCoolantTemperature',
  'engineRpm',
  'fuelLevel',
  'heaterValveOpening',
  'lineFrequency',
  'lineVoltage',
  'modemBatteryVoltage',
  'suctionPressure',
  'suctionTemperature',
  'hotGasValveOpening',
  'economizerValveOpening',
  'expansionValveOpening',
] as const;
/** The two sensors that report a level (a string) rather than a number. */
export const LEVEL_SENSORS: readonly string[] = ['condenserFanLevel', 'evaporatorFanLevel'];
export const SPEC_TYPES = ['REEFER', 'GENSET'] as const;
export type SpecType = (typeof SPEC_TYPES)[number];

/** A year, in minutes: the longest duration or frequency accepted. */
export const MAX_MINUTES = 525_600;

const NumericRange = Type.Array(Nullable(Type.Number()), {
  minItems: 2,
  maxItems: 4,
  description: '[min, max, durationMinutes, frequencyMinutes]: null min or max = unbounded; the last two default to 0',
});
const LevelRange = Type.Array(Str(32, { minLength: 1 }), { minItems: 1, maxItems: 16, description: 'The accepted levels' });
const sensorGroup = (keys: readonly string[]) =>
  Type.Object(Object.fromEntries(keys.map((k) => [k, Type.Optional(LEVEL_SENSORS.includes(k) ? LevelRange : NumericRange)])), {
    additionalProperties: false,
  });
const closed = <T extends Record<string, TSchema>>(props: T, description?: string) =>
  Type.Object(props, { additionalProperties: false, ...(description ? { description } : {}) });

export const Ranges = closed(
  {
    cargo: Type.Optional(closed({ sensors: Type.Optional(sensorGroup(CARGO_SENSORS)) })),
    hardware: Type.Optional(closed({ sensors: Type.Optional(sensorGroup(HARDWARE_SENSORS)) })),
  },
  'Accepted sensor values and when to notify (API guide 8)',
);
const Timing = closed({
  duration: Type.Number({
    minimum: 0,
    maximum: MAX_MINUTES,
    description: 'Minutes a violation must last before it notifies (0 = at once)',
  }),
  frequency: Type.Number({ minimum: 0, maximum: MAX_MINUTES, description: 'Minutes between repeats while it lasts (0 = once)' }),
});
const Topic = closed({ default: Timing });
/** The set point rule's defaults (API guide 8): a mismatch over half a degree for 10 minutes, told once. */
export const SETPOINT_DEFAULTS = { tolerance: 0.5, duration: 10, frequency: 0 } as const;
/** The most a set point may differ from the specification's and still match (°C). */
export const MAX_SETPOINT_TOLERANCE = 50;
// Opt-in: without it a specification's temperatureSetpoint is only kept for the customer, as before.
const SetpointTopic = closed(
  {
    tolerance: Type.Optional(
      Type.Number({
        minimum: 0,
        maximum: MAX_SETPOINT_TOLERANCE,
        description: `°C the reported set point (data.temperatureSetpoint) may differ from settings.cargo.settings.temperatureSetpoint (default ${SETPOINT_DEFAULTS.tolerance})`,
      }),
    ),
    default: Type.Optional(Timing),
  },
  `Set point mismatch: when absent, default is {duration: ${SETPOINT_DEFAULTS.duration}, frequency: ${SETPOINT_DEFAULTS.frequency}}`,
);
export const NotificationSettings = closed(
  {
    controller: Type.Optional(
      closed({
        alarm: Type.Optional(Topic),
        power: Type.Optional(Topic),
        ca: Type.Optional(Topic),
        setpoint: Type.Optional(SetpointTopic),
      }),
    ),
    controlModule: Type.Optional(closed({ scheduler: Type.Optional(Topic) })),
  },
  "When and how often to notify on alarms (data.alarms), power loss (data.powerOn false), CA alarms (data.caAlarms), scheduler alarms (data.schedulerAlarms) and a reported set point (data.temperatureSetpoint) off the specification's",
);
const Setpoint = Type.Optional(Nullable(Type.Number()));
export const Settings = closed(
  {
    cargo: Type.Optional(
      closed({
        settings: Type.Optional(
          closed({ co2Setpoint: Setpoint, humiditySetpoint: Setpoint, o2Setpoint: Setpoint, temperatureSetpoint: Setpoint }),
        ),
      }),
    ),
  },
  'Set points',
);

export type RangesValue = Static<typeof Ranges>;
export type NotificationValue = Static<typeof NotificationSettings>;
export type SettingsValue = Static<typeof Settings>;
