// A simulated reefer's controller as commands see it (API guide 8): what it runs at (set point,
// humidity set point, mode), what it is doing (defrost, pre-trip inspection, switched off) and its
// alarms; and how it answers each command type: ACKNOWLEDGED when it obeys, FAILED with the reason
// when it cannot (it has no controlled atmosphere; a pre-trip inspection wants an empty unit at a
// depot, not one under way with cargo). The simulator moves the temperatures towards the set point
// in simulated time, so a new set point shows in the next records and is reached over simulated
// minutes.

export const MODES = ['continuous', 'cycle', 'sleep'] as const;
export type Mode = (typeof MODES)[number];

export interface Controller {
  /** The set point the unit runs at (reported as data.temperatureSetpoint), °C. */
  setpoint: number;
  humiditySetpoint: number | null;
  mode: Mode;
  /** Switched off by POWER_OFF, until POWER_ON (a power loss of the simulation is powerOff). */
  switchedOff: boolean;
  /** Simulated seconds left of an alarm, a defrost, a pre-trip inspection. */
  alarm: number;
  defrost: number;
  pti: number;
}

/** A command as a device gets it (GET /commands, or the MQTT downlink's message). */
export interface DeviceCommand {
  id: string;
  type: string;
  parameters: Record<string, unknown> | null;
}
export interface Answer {
  status: 'ACKNOWLEDGED' | 'FAILED';
  message?: string;
}

/** How long a defrost and a pre-trip inspection run, in simulated seconds. */
export const DEFROST_SECONDS = 30 * 60;
export const PTI_SECONDS = 45 * 60;

const failed = (message: string): Answer => ({ status: 'FAILED', message });
const done: Answer = { status: 'ACKNOWLEDGED' };

/**
 * Applies `c` to the controller, or says why not. `atDepot`: the unit stands at a port or depot
 * (a pre-trip inspection runs only there).
 */
export function obey(r: Controller, c: DeviceCommand, atDepot: boolean): Answer {
  const value = c.parameters?.value;
  switch (c.type) {
    case 'SET_TEMPERATURE':
      if (typeof value !== 'number' || value < -40 || value > 40) return failed('SET_TEMPERATURE needs a value from -40 to 40 °C.');
      r.setpoint = value;
      return done;
    case 'SET_HUMIDITY':
      if (typeof value !== 'number' || value < 0 || value > 100) return failed('SET_HUMIDITY needs a value from 0 to 100 %.');
      r.humiditySetpoint = value;
      return done;
    case 'SET_CO2':
    case 'SET_O2':
      return failed(`This unit has no controlled atmosphere (CA): it cannot take ${c.type}.`);
    case 'SET_MODE': {
      const mode = c.parameters?.mode;
      if (!MODES.includes(mode as Mode)) return failed(`SET_MODE needs a mode: ${MODES.join(', ')}.`);
      r.mode = mode as Mode;
      return done;
    }
    case 'START_DEFROST':
      if (r.switchedOff) return failed('The unit is switched off: no defrost.');
      r.defrost = DEFROST_SECONDS;
      return done;
    case 'START_PTI':
      if (!atDepot) return failed('A pre-trip inspection runs at a depot with the unit empty; this one is under way with cargo.');
      if (r.switchedOff) return failed('The unit is switched off: no pre-trip inspection.');
      r.pti = PTI_SECONDS;
      return done;
    case 'POWER_ON':
      r.switchedOff = false;
      return done;
    case 'POWER_OFF':
      r.switchedOff = true;
      r.defrost = 0;
      r.pti = 0;
      return done;
    case 'CLEAR_ALARMS':
      r.alarm = 0;
      return done;
    default:
      return failed(`Unknown command type ${c.type}.`);
  }
}
